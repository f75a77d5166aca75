package config

import "reflect"

// SecretKeys lists the keys of cfg (a configuration value) tagged secret.
func SecretKeys(cfg any) []string {
	var out []string
	for _, f := range fields(reflect.ValueOf(cfg)) {
		if f.secret() != "" {
			out = append(out, f.key())
		}
	}
	return out
}

// SecretFileKeys lists the keys of cfg that read a secret from a file.
func SecretFileKeys(cfg any) []string {
	var out []string
	for _, f := range fields(reflect.ValueOf(cfg)) {
		if f.tag.Get(secretFileTag) != "" {
			out = append(out, f.key())
		}
	}
	return out
}
