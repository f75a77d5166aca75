package schema

import "github.com/mantis-deploy/mantis/internal/domain"

// expiredText is the error a request past DispatchRequestTTL ends with.
var expiredText = "expired " + domain.DispatchRequestTTLText + " after creation"
