package grpcapi

import (
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/schema"
)

// resultBatch is a MandibleService's result batcher, made on first use: concurrent
// StoreCommandResult calls share one statement and one commit (schema.ResultBatcher),
// and a lone call goes at once.
type resultBatch struct {
	once sync.Once
	b    *schema.ResultBatcher
}

// batcher returns the batcher over db, making it on the first call.
func (r *resultBatch) batcher(db *pgxpool.Pool) *schema.ResultBatcher {
	r.once.Do(func() { r.b = &schema.ResultBatcher{DB: db} })
	return r.b
}

// ResultBatches returns how many batches the service's StoreCommandResult calls were
// stored in and how many results those held: results/batches is the mean batch size.
func (s *MandibleService) ResultBatches() (batches, results int64) {
	return s.results.batcher(s.DB).Stats()
}
