// Package rpc holds what every gRPC link between Mandible, Thorax and the agents
// shares: the message and stream bounds both ends set (limit.go), the call metrics
// (metrics.go) and the one answer to which failed calls are worth repeating
// (retry.go).
package rpc
