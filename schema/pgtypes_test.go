package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// uuidBatch is the size of the id arrays a claim or a delivery sends.
const uuidBatch = 500

func uuids(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.New()
	}
	return out
}

// TestRegisteredTypesRoundTripUUIDs sends uuids, arrays of them and a nil pointer
// through a connection with the types registered, and reads them back unchanged.
func TestRegisteredTypesRoundTripUUIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testenv.DatabaseURL(t))
	require.NoError(t, err)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	schema.RegisterTypes(conn.TypeMap())

	ids := uuids(uuidBatch)
	var back []uuid.UUID
	var text string
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid[], ($1::uuid[])[1]::text`, ids).Scan(&back, &text))
	require.Equal(t, ids, back)
	require.Equal(t, ids[0].String(), text, "the server reads the id sent, byte for byte")

	var none *uuid.UUID
	var isNull bool
	one := ids[1]
	var same bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT $1::uuid IS NULL, $2::uuid = $3::text::uuid`, none, &one, one.String()).Scan(&isNull, &same))
	require.True(t, isNull, "a nil *uuid.UUID is NULL")
	require.True(t, same, "a *uuid.UUID is its id")
}

// TestRegisteredTypesEncodeUUIDArraysWithoutTextPerElement: an array of uuid.UUID is
// encoded without a string (and a failed plan's error) per element, which is what the
// registration is for. Not parallel: AllocsPerRun counts the whole process's.
func TestRegisteredTypesEncodeUUIDArraysWithoutTextPerElement(t *testing.T) {
	ids := uuids(uuidBatch)
	registered := pgtype.NewMap()
	schema.RegisterTypes(registered)
	allocs := func(m *pgtype.Map) float64 {
		buf := make([]byte, 0, 64<<10)
		return testing.AllocsPerRun(20, func() {
			_, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0])
			require.NoError(t, err)
		})
	}
	plain, with := allocs(pgtype.NewMap()), allocs(registered)
	require.Greater(t, plain, float64(uuidBatch), "without the registration each element costs allocations")
	require.Less(t, with, plain/5, "with it an array of %d ids takes a fraction of the allocations (without: %.0f)", uuidBatch, plain)
}

// BenchmarkEncodeUUIDArray encodes an array of uuidBatch ids, as the claim and the
// delivery send them, uuidEncodes times each with the types registered and without
// (the baseline), in turns, in one run. speedup is the baseline's time over the
// registered one's.
func BenchmarkEncodeUUIDArray(b *testing.B) {
	const uuidEncodes = 200
	ids := uuids(uuidBatch)
	registered := pgtype.NewMap()
	schema.RegisterTypes(registered)
	plain := pgtype.NewMap()
	buf := make([]byte, 0, 64<<10)
	encode := func(m *pgtype.Map) time.Duration {
		start := time.Now()
		for range uuidEncodes {
			if _, err := m.Encode(pgtype.UUIDArrayOID, pgtype.BinaryFormatCode, ids, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var withTypes, without time.Duration
	for range b.N {
		without += encode(plain)
		withTypes += encode(registered)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N*uuidEncodes) }
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(per(without), "plain-us/array")
	b.ReportMetric(per(withTypes), "registered-us/array")
	b.ReportMetric(without.Seconds()/withTypes.Seconds(), "speedup")
}
