package schema

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// AfterConnect prepares a new connection for this package's queries (RegisterTypes):
// set it as a pool's AfterConnect.
func AfterConnect(_ context.Context, conn *pgx.Conn) error {
	RegisterTypes(conn.TypeMap())
	return nil
}

// RegisterTypes teaches a connection's type map to send the Go types of this package's
// queries the direct way (a pool's AfterConnect calls it through AfterConnect); a map without it sends
// the same values, only slower.
//
// uuid.UUID implements driver.Valuer, so pgx, which honours a Valuer before a type's
// underlying [16]byte, sends each one as its 36-character text, parsed again per value
// (and per element of a uuid[] parameter, at the cost of a failed plan and its error
// each time). The claim and delivery send arrays of hundreds of ids per statement, so
// that path cost Mandible 13% of its CPU under load. Registered, a uuid.UUID
// goes out as the 16 bytes of pgtype.UUID.
func RegisterTypes(m *pgtype.Map) {
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDEncodePlan}, m.TryWrapEncodePlanFuncs...)
}

// tryWrapUUIDEncodePlan wraps a uuid.UUID as the pgtype.UUID it is.
func tryWrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, pgtype.UUID{Bytes: u, Valid: true}, true
	}
	return nil, nil, false
}

// uuidEncodePlan sends a uuid.UUID through the plan of pgtype.UUID.
type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode(pgtype.UUID{Bytes: value.(uuid.UUID), Valid: true}, buf)
}
