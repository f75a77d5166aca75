package apitoken

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// fileEntry is one token of a token file.
type fileEntry struct {
	Name   string `toml:"name" json:"name"`
	Scope  string `toml:"scope" json:"scope"`
	SHA256 string `toml:"sha256" json:"sha256"`
}

// tokenFile is a token file: TOML with [[tokens]] tables, or JSON
// {"tokens": [...]} (a bare JSON array is accepted too).
type tokenFile struct {
	Tokens []fileEntry `toml:"tokens" json:"tokens"`
}

// LoadFile reads a token file. Every problem is reported at once, each naming its
// entry and key; a file without tokens is an error, since it would lock every caller out.
func LoadFile(path string) ([]Token, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading token file: %w", err)
	}
	tokens, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	return tokens, nil
}

// Parse reads the content of a token file (TOML, or JSON when it starts with '{' or '[').
func Parse(b []byte) ([]Token, error) {
	var f tokenFile
	trimmed := bytes.TrimSpace(b)
	switch {
	case bytes.HasPrefix(trimmed, []byte("[")) && !bytes.HasPrefix(trimmed, []byte("[[")):
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f.Tokens); err != nil {
			return nil, fmt.Errorf("decoding JSON: %w", err)
		}
	case bytes.HasPrefix(trimmed, []byte("{")):
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			return nil, fmt.Errorf("decoding JSON: %w", err)
		}
	default:
		md, err := toml.Decode(string(b), &f)
		if err != nil {
			return nil, fmt.Errorf("decoding TOML: %w", err)
		}
		if undecoded := md.Undecoded(); len(undecoded) > 0 {
			return nil, fmt.Errorf("unknown key %s", undecoded[0])
		}
	}
	return validate(f.Tokens)
}

func validate(entries []fileEntry) ([]Token, error) {
	if len(entries) == 0 {
		return nil, errors.New("holds no tokens")
	}
	var (
		problems []string
		out      []Token
		names    = map[string]bool{}
		hashes   = map[string]bool{}
	)
	for i, e := range entries {
		at := fmt.Sprintf("tokens[%d]", i)
		var tok Token
		if !validName(e.Name) {
			problems = append(problems, fmt.Sprintf("%s.name: must be 1-64 letters, digits, '-', '_', '.' or '@', got %q", at, e.Name))
		} else if names[e.Name] {
			problems = append(problems, fmt.Sprintf("%s.name: %q names another token too", at, e.Name))
		}
		names[e.Name] = true
		tok.Name = e.Name
		tok.Scope = Scope(e.Scope)
		if !tok.Scope.Valid() {
			problems = append(problems, fmt.Sprintf("%s.scope: must be read, deploy or admin, got %q", at, e.Scope))
		}
		h, err := hex.DecodeString(strings.ToLower(e.SHA256))
		switch {
		case err != nil || len(h) != len(tok.SHA256):
			problems = append(problems, fmt.Sprintf("%s.sha256: must be the 64 hex digits of the token's SHA-256 (mantisctl token create prints it)", at))
		case hashes[string(h)]:
			problems = append(problems, fmt.Sprintf("%s.sha256: the same token is listed twice", at))
		default:
			hashes[string(h)] = true
			copy(tok.SHA256[:], h)
		}
		out = append(out, tok)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}
