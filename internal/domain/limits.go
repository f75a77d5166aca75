package domain

// The scopes of a concurrency limit (concurrency_limits.scope).
const (
	// LimitScopeTarget caps the commands running at once on one target: the target
	// a limit's value names, or, with no value, every target (the default).
	LimitScopeTarget = "target"
	// LimitScopeLabel caps the commands running at once on all the targets whose
	// label has the limit's value.
	LimitScopeLabel = "label"
)

// LimitScopes lists every limit scope.
var LimitScopes = []string{LimitScopeTarget, LimitScopeLabel}

// DefaultTargetLimit is the name of the per-target default limit (scope target, no
// value), which caps every target at one running command unless changed. It may be
// changed but not deleted.
const DefaultTargetLimit = "target-default"
