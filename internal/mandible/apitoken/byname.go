package apitoken

// ByName returns the token named name. A session that names its token is checked
// against the keyring on every request, so a token removed from the file ends its
// sessions at the next reload.
func (k *Keyring) ByName(name string) (Token, bool) {
	for _, t := range *k.tokens.Load() {
		if t.Name == name {
			return t, true
		}
	}
	return Token{}, false
}
