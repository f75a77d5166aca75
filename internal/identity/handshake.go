package identity

import (
	"crypto/x509"
	"log/slog"
)

// ExpectedAllowedName is the expected label of a handshake refused because the
// peer's certificate names none of a list of allowed names
// (listen.allowed_client_names): the names themselves are configuration, not a
// bounded label.
const ExpectedAllowedName = "allowed_name"

// HandshakeRefusal is a TLS handshake refused for the certificate the peer
// presented, by a check of its identity (tlsconf.RequirePeerRole,
// tlsconf.RequirePeerNames).
type HandshakeRefusal struct {
	// Expected is what the check required: a role, or ExpectedAllowedName.
	Expected string
	// Presented is the role of the peer certificate's identity, or "none".
	Presented string
	// Peer names the certificate: its identity, or its CommonName without one.
	Peer string
	// Err is the error the handshake fails with.
	Err error
}

// PresentedBy returns the presented label and the name of a peer certificate: its
// identity's role and the identity, or "none" and its CommonName (nil: "none",
// "").
func PresentedBy(leaf *x509.Certificate) (presented, peer string) {
	if leaf == nil {
		return presentedNone, ""
	}
	id, err := FromCertificate(leaf)
	if err != nil {
		return presentedNone, leaf.Subject.CommonName
	}
	return string(id.Role), id.String()
}

// HandshakeRefusals returns the hook of tlsconf's peer checks that logs each
// handshake refused on link and counts it in RefusalsMetric with the expected and
// presented labels of a call refused for its identity: the same peer is counted
// alike whether TLS or the gRPC guard turned it away. m may be nil (no count).
func HandshakeRefusals(link string, logger *slog.Logger, m *Metrics) func(HandshakeRefusal) {
	if logger == nil {
		logger = slog.Default()
	}
	return func(r HandshakeRefusal) {
		logger.Warn("refused handshake for its identity",
			"link", link, "stage", "handshake", "expected", r.Expected, "presented", r.Presented,
			"peer", r.Peer, "err", r.Err)
		m.refused(link, r.Expected, r.Presented)
	}
}
