package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"
)

// SecretFileSuffix ends the name of every key that reads a secret from a file
// ("database.url_file" for "database.url"), as a Kubernetes Secret mounted as files
// provides it.
const SecretFileSuffix = "_file"

// secretFileTag, on a key's field, names the secret key of the same section whose
// value the file at the key's path holds: `secretfile:"url"` on url_file.
const secretFileTag = "secretfile"

// readSecretFiles sets every secret key of cfg (a pointer) whose _file sibling is
// set to that file's content, its trailing newline trimmed. A key set both ways,
// and a file that cannot be read, is a problem naming the keys and the path; the
// file's content never appears in one.
func readSecretFiles(cfg any) Errors {
	all := fields(reflect.ValueOf(cfg).Elem())
	byKey := make(map[string]field, len(all))
	for _, f := range all {
		byKey[f.key()] = f
	}
	var errs Errors
	for _, f := range all {
		sibling := f.tag.Get(secretFileTag)
		path := f.value.String()
		if sibling == "" || path == "" {
			continue
		}
		target, ok := byKey[strings.Join(append(append([]string(nil), f.path[:len(f.path)-1]...), sibling), ".")]
		if !ok {
			errs = append(errs, &FieldError{Key: f.key(), Problem: "names no secret key " + sibling})
			continue
		}
		if !target.value.IsZero() {
			errs = append(errs, &FieldError{Key: f.key(),
				Problem: fmt.Sprintf("%s and %s are both set; set one", target.key(), f.key())})
			continue
		}
		content, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, &FieldError{Key: f.key(), Problem: fmt.Sprintf("reading the secret of %s: %v", target.key(), err)})
			continue
		}
		if err := setSecret(target.value, trimNewline(string(content))); err != nil {
			errs = append(errs, &FieldError{Key: f.key(), Problem: fmt.Sprintf("file %s does not hold a valid %s", path, target.key())})
		}
	}
	return errs
}

// trimNewline drops the one line ending an editor or echo leaves at the end of a file.
func trimNewline(s string) string {
	s = strings.TrimSuffix(s, "\n")
	return strings.TrimSuffix(s, "\r")
}

// setSecret sets a secret key from a file: a list takes one item per line (or
// comma-separated, as in its environment variable).
func setSecret(v reflect.Value, s string) error {
	if v.Kind() == reflect.Slice {
		s = strings.ReplaceAll(s, "\n", ",")
	}
	return setString(v, s)
}
