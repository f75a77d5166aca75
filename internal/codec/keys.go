package codec

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// KeyFileExt is how the name of a key file in a keys directory ends; the rest of the
// name is the key id.
const KeyFileExt = ".key"

// LoadFile reads a keyring file: one key a line, "<key id> <base64 key>", blank lines
// and lines starting with # ignored. The first key is the current one. The file must be
// readable by its owner only.
func LoadFile(path string) (*Codec, error) {
	data, err := readPrivate(path)
	if err != nil {
		return nil, err
	}
	keys := map[string][]byte{}
	var current string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, encoded, ok := strings.Cut(line, " ")
		if !ok || id == "" {
			return nil, fmt.Errorf("codec key file %s line %d: want \"<key id> <base64 key>\"", path, n)
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("codec key file %s line %d: key id %q appears twice", path, n, id)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
		if err != nil {
			return nil, fmt.Errorf("codec key file %s line %d: key is not base64", path, n)
		}
		keys[id] = key
		if current == "" {
			current = id
		}
	}
	if current == "" {
		return nil, fmt.Errorf("codec key file %s holds no key", path)
	}
	return New(current, keys)
}

// LoadDir reads a directory holding one file per key, "<key id>.key", each the base64
// key. current names the key to encrypt with; it may be empty when the directory holds
// exactly one key.
func LoadDir(dir, current string) (*Codec, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*"+KeyFileExt))
	if err != nil {
		return nil, fmt.Errorf("listing codec keys in %s: %w", dir, err)
	}
	sort.Strings(names)
	keys := map[string][]byte{}
	for _, name := range names {
		data, err := readPrivate(name)
		if err != nil {
			return nil, err
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("codec key %s is not base64", name)
		}
		keys[strings.TrimSuffix(filepath.Base(name), KeyFileExt)] = key
	}
	switch {
	case len(keys) == 0:
		return nil, fmt.Errorf("codec keys directory %s holds no *%s file", dir, KeyFileExt)
	case current == "" && len(keys) > 1:
		return nil, fmt.Errorf("codec keys directory %s holds %d keys: name the current one", dir, len(keys))
	case current == "":
		for id := range keys {
			current = id
		}
	}
	return New(current, keys)
}

// readPrivate reads a key file, refusing one that its group or others may read.
func readPrivate(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading codec keys: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("codec keys %s: mode %04o lets others read it; chmod 600", path, st.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading codec keys: %w", err)
	}
	return data, nil
}

// WriteKeyFile writes a new keyring file at path (mode 0600) holding one fresh random
// key named keyID, unless the file exists already. It reports whether it wrote one.
func WriteKeyFile(path, keyID string) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return false, fmt.Errorf("drawing a codec key: %w", err)
	}
	line := fmt.Sprintf("# Temporal payload codec keys: \"<key id> <base64 key>\", the first is current.\n%s %s\n",
		keyID, base64.StdEncoding.EncodeToString(key))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, fmt.Errorf("writing codec key file: %w", err)
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return false, fmt.Errorf("writing codec key file: %w", err)
	}
	return true, f.Close()
}
