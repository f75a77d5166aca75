package activityio

// DeclareTopologyResult lists what was declared, for the Web UI.
type DeclareTopologyResult struct {
	Exchanges []string `json:"exchanges"`
	Queues    []string `json:"queues"`
	Bindings  int      `json:"bindings"`
}
