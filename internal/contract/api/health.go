package api

// Health is the answer to GET /healthz.
type Health struct {
	Status string `json:"status"`
}

// StatusOK is a passing health or readiness check.
const StatusOK = "ok"

// Readiness is the answer to GET /readyz: each check's result by name, "ok" or the
// error (503 when any failed).
type Readiness struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}
