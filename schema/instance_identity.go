package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// BindInstanceCertificate records the certificate name that registered instance.
// A binding is set once: an instance already bound keeps its name.
func BindInstanceCertificate(ctx context.Context, db DB, instance uuid.UUID, certName string) error {
	tag, err := db.Exec(ctx, `UPDATE thorax_instances SET cert_name = $2 WHERE id = $1 AND cert_name IS NULL`, instance, certName)
	if err != nil {
		return fmt.Errorf("binding thorax instance %s to certificate %s: %w", instance, certName, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("binding thorax instance %s to certificate %s: %w", instance, certName, ErrNotFound)
	}
	return nil
}

// InstanceCertificate returns the certificate name bound to instance: "" for an
// instance registered without one, ErrNotFound for an unknown instance.
func InstanceCertificate(ctx context.Context, db DB, instance uuid.UUID) (string, error) {
	var name *string
	err := notFound(db.QueryRow(ctx, `SELECT cert_name FROM thorax_instances WHERE id = $1`, instance).Scan(&name))
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
