package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// InstanceCertificate returns the certificate name bound to instance: "" for an
// instance registered without one, ErrNotFound for an unknown instance.
func InstanceCertificate(ctx context.Context, db DB, instance uuid.UUID) (string, error) {
	name, err := queries.InstanceCertificate(ctx, db, instance)
	err = notFound(err)
	if errors.Is(err, ErrNotFound) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("reading the certificate of thorax instance %s: %w", instance, err)
	}
	if name == nil {
		return "", nil
	}
	return *name, nil
}
