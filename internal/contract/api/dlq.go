package api

// GET /api/v1/dlq answers with the broker's listing (broker.DLQListing), which is
// the broker package's own contract.

// DLQRequeueBody is the body of POST /api/v1/dlq/requeue.
type DLQRequeueBody struct {
	// To is the priority queue the messages go back to: high, normal or low.
	To string `json:"to"`
	// Limit is the most messages moved; 0 moves every message the DLQ holds
	// when the call begins.
	Limit int `json:"limit"`
}

// DLQRequeueResult is the answer to POST /api/v1/dlq/requeue.
type DLQRequeueResult struct {
	Requeued int    `json:"requeued"`
	To       string `json:"to"`
	Queue    string `json:"queue"`
}

// DLQPurgeBody is the body of POST /api/v1/dlq/purge; Confirm must be true.
type DLQPurgeBody struct {
	Confirm bool `json:"confirm"`
}

// DLQPurgeResult is the answer to POST /api/v1/dlq/purge.
type DLQPurgeResult struct {
	Purged int `json:"purged"`
}
