package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/mantis-deploy/mantis/schema/internal/dbsqlc"
)

// BindInstanceCertificate records the certificate name that registered instance.
// A binding is set once: an instance already bound keeps its name.
func BindInstanceCertificate(ctx context.Context, db DB, instance uuid.UUID, certName string) error {
	n, err := queries.BindInstanceCertificate(ctx, db, dbsqlc.BindInstanceCertificateParams{ID: instance, CertName: certName})
	if err != nil {
		return fmt.Errorf("binding thorax instance %s to certificate %s: %w", instance, certName, err)
	}
	if n == 0 {
		return fmt.Errorf("binding thorax instance %s to certificate %s: %w", instance, certName, ErrNotFound)
	}
	return nil
}

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
