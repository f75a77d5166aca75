package config

import (
	"reflect"
	"strings"
)

// KeyDoc describes one key of a configuration, found by reflection as the loader
// finds it, for the generated references and sample files (tools/docgen).
type KeyDoc struct {
	// Key is the key's path, dotted: "queue.password".
	Key string
	// Path is the key's parts: {"queue", "password"}.
	Path []string
	// Env is the environment variable that overrides the key.
	Env string
	// Default is the key's value in the configuration Keys was given.
	Default any
	// Type is the value's Go type, to be described.
	Type reflect.Type
	// Secret is the key's secret tag: "" (not secret), "true" (redacted whole) or
	// "url" (the password inside the URL redacted).
	Secret string
	// FileOf, on a *_file key, names the secret key of the same section whose value
	// the file holds.
	FileOf string
	// FileKey, on a secret key, names its *_file sibling, if any.
	FileKey string
	// Struct and Field are the Go struct type declaring the key and the field's name,
	// where the key's doc comment is.
	Struct, Field string
}

// Keys lists every key of cfg (a configuration value such as DefaultMandible()), in
// the order of the struct's fields.
func Keys(cfg any) []KeyDoc {
	all := fields(reflect.ValueOf(cfg))
	out := make([]KeyDoc, 0, len(all))
	index := map[string]int{}
	for _, f := range all {
		d := KeyDoc{Key: f.key(), Path: f.path, Env: f.envName(), Default: f.value.Interface(), Type: f.value.Type(),
			Secret: f.secret(), Struct: f.owner.Name(), Field: f.name}
		if of := f.tag.Get(secretFileTag); of != "" {
			d.FileOf = strings.Join(append(append([]string(nil), f.path[:len(f.path)-1]...), of), ".")
		}
		index[d.Key] = len(out)
		out = append(out, d)
	}
	for _, d := range out {
		if i, ok := index[d.FileOf]; ok {
			out[i].FileKey = d.Key
		}
	}
	return out
}
