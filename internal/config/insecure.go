package config

// validatePlaintext refuses section.insecure on an address (addrKey's value)
// that is not loopback, unless section.insecure_allow_remote says so: a
// plaintext link has no identities, so on a reachable address anyone may
// call it (a listen agent's port is then a remote shell) or stand in for its
// server. This follows http.allow_plaintext. A dial address with no host is
// not taken for loopback.
func (t TLS) validatePlaintext(p *problems, section, addrKey, addr string) {
	if !t.Insecure || t.InsecureAllowRemote || addr == "" || loopback(addr) {
		return
	}
	p.add(section+".insecure", "plaintext without certificates on %s %q, which is not a loopback address: "+
		"set %s.ca_cert_path, %s.cert_path and %s.key_path, or %s.insecure_allow_remote = true "+
		"(unsafe: anyone who reaches the address acts without an identity, and the link is in clear)",
		addrKey, addr, section, section, section, section)
}

// RemotePlaintext reports whether the link is plaintext with
// insecure_allow_remote set: the process warns of it when it starts.
func (t TLS) RemotePlaintext() bool { return t.Insecure && t.InsecureAllowRemote }

// LoopbackAddress reports whether addr (host:port) names a loopback address:
// 127.0.0.0/8, ::1 or localhost. An empty host is not loopback.
func LoopbackAddress(addr string) bool { return loopback(addr) }
