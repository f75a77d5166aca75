package config

import (
	"encoding"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// field is one settable key of a configuration struct, found by reflection
// over the toml tags, so env names, redaction and checks never drift from
// the struct.
type field struct {
	path  []string // TOML key parts, e.g. {"queue", "ca_cert_path"}
	value reflect.Value
	tag   reflect.StructTag
	// owner and name are the struct type declaring the field and the field's Go
	// name, where its doc comment is (Keys).
	owner reflect.Type
	name  string
}

func (f field) key() string { return strings.Join(f.path, ".") }

func (f field) envName() string {
	return "MANTIS_" + strings.ToUpper(strings.Join(f.path, "_"))
}

func (f field) secret() string { return f.tag.Get("secret") }

var (
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
	durationType    = reflect.TypeFor[Duration]()
)

// fields lists the keys of the struct v (a struct value, addressable when
// the caller means to set fields). Sections become path prefixes; embedded
// structs without a toml name are flattened, as the TOML decoder does.
func fields(v reflect.Value) []field {
	var out []field
	walk(v, nil, &out)
	return out
}

func walk(v reflect.Value, prefix []string, out *[]field) {
	for _, f := range tomlFields(v) {
		if f.embedded {
			walk(f.value, prefix, out)
			continue
		}
		path := append(append([]string(nil), prefix...), f.name)
		if f.sf.Type.Kind() == reflect.Struct && !reflect.PointerTo(f.sf.Type).Implements(textUnmarshaler) {
			walk(f.value, path, out)
			continue
		}
		*out = append(*out, field{path: path, value: f.value, tag: f.sf.Tag, owner: v.Type(), name: f.sf.Name})
	}
}

// tomlField is one exported field of a struct as the TOML decoder sees it: its key,
// or embedded when it is an untagged embedded struct whose fields are flattened.
type tomlField struct {
	sf       reflect.StructField
	name     string
	value    reflect.Value
	embedded bool
}

// tomlFields lists the fields of the struct v the TOML decoder reads, in order,
// leaving out unexported fields and those tagged toml:"-".
func tomlFields(v reflect.Value) []tomlField {
	var out []tomlField
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		f := tomlField{sf: sf, name: name, value: v.Field(i)}
		f.embedded = sf.Anonymous && name == "" && sf.Type.Kind() == reflect.Struct
		if f.name == "" {
			f.name = sf.Name
		}
		out = append(out, f)
	}
	return out
}

// decodeFile reads the TOML file at path over cfg (a pointer). A file that
// cannot be read or parsed is returned as the error; keys the configuration
// does not have are returned as problems, all of them.
func decodeFile(cfg any, path string) (toml.MetaData, Errors, error) {
	md, err := toml.DecodeFile(path, cfg)
	if err != nil {
		return md, nil, fmt.Errorf("reading config %s: %w", path, hideSecretValue(cfg, err))
	}
	var errs Errors
	unknown := map[string]bool{}
	for _, k := range md.Undecoded() {
		key := k.String()
		unknown[key] = true
		// A whole unknown table is one problem, not one per key inside it.
		if len(k) > 1 && unknown[k[:len(k)-1].String()] {
			continue
		}
		errs = append(errs, &FieldError{Key: key, Problem: "unknown key in " + path})
	}
	// The decoder quietly skips a non-table value for a table-typed key
	// (labels = 3); say so instead.
	for _, f := range fields(reflect.ValueOf(cfg).Elem()) {
		if f.value.Kind() == reflect.Map && md.IsDefined(f.path...) && md.Type(f.path...) != "Hash" {
			errs = append(errs, &FieldError{Key: f.key(), Problem: fmt.Sprintf("must be a table, got %s in %s", md.Type(f.path...), path)})
		}
	}
	return md, errs, nil
}

// hideSecretValue replaces a parse error about a secret key (queue.password =
// hunter2, unquoted) by one that does not quote what the parser found there, which
// would be a piece of the secret.
func hideSecretValue(cfg any, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) || pe.LastKey == "" {
		return err
	}
	for _, f := range fields(reflect.ValueOf(cfg).Elem()) {
		if f.secret() == "true" && f.key() == pe.LastKey {
			return fmt.Errorf("toml: line %d (last key %q): the value does not parse (not shown: the key is secret; is it a quoted string?)",
				pe.Position.Line, pe.LastKey)
		}
	}
	return err
}

// applyEnv sets every key of cfg (a pointer) whose MANTIS_ variable env
// defines. Each variable that does not parse is one problem naming it.
func applyEnv(cfg any, env func(string) (string, bool)) Errors {
	if env == nil {
		return nil
	}
	var errs Errors
	for _, f := range fields(reflect.ValueOf(cfg).Elem()) {
		name := f.envName()
		s, ok := env(name)
		if !ok {
			continue
		}
		if err := setString(f.value, s); err != nil {
			problem := fmt.Sprintf("%v (sets %s)", err, f.key())
			if f.secret() != "" {
				problem = "invalid value (sets " + f.key() + ")"
			}
			errs = append(errs, &FieldError{Key: name, Problem: problem})
		}
	}
	return errs
}

// setString parses s into v according to v's type.
func setString(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		if err := u.UnmarshalText([]byte(s)); err != nil {
			return fmt.Errorf("invalid value %q: %w", s, err)
		}
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("invalid boolean %q", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("invalid integer %q", s)
		}
		v.SetInt(n)
	case reflect.Slice:
		if v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", v.Type())
		}
		items := []string{}
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v.Set(reflect.ValueOf(items))
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
			return fmt.Errorf("unsupported type %s", v.Type())
		}
		m := map[string]string{}
		for pair := range strings.SplitSeq(s, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return fmt.Errorf("invalid pair %q, want key=value", pair)
			}
			m[k] = strings.TrimSpace(val)
		}
		v.Set(reflect.ValueOf(m))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// durations reports every Duration key of cfg that is not positive.
func (p *problems) durations(cfg any) {
	for _, f := range fields(reflect.ValueOf(cfg)) {
		if f.value.Type() != durationType {
			continue
		}
		if d := f.value.Interface().(Duration); d.Duration <= 0 {
			p.add(f.key(), "must be positive, got %s", d)
		}
	}
}

const redactedText = "[redacted]"

// redacted returns a copy of the struct cfg with every secret:"..." field
// replaced: "true" hides the value, "url" hides the password in a URL. The
// copy shares nothing the redaction changes with cfg.
func redacted(cfg any) reflect.Value {
	v := reflect.New(reflect.TypeOf(cfg)).Elem()
	v.Set(reflect.ValueOf(cfg))
	for _, f := range fields(v) {
		switch f.secret() {
		case "":
		case "url":
			f.value.SetString(redactURL(f.value.String()))
		default:
			switch f.value.Kind() {
			case reflect.String:
				if f.value.String() != "" {
					f.value.SetString(redactedText)
				}
			case reflect.Slice:
				hidden := make([]string, f.value.Len())
				for i := range hidden {
					hidden[i] = redactedText
				}
				f.value.Set(reflect.ValueOf(hidden))
			}
		}
	}
	return v
}

// redactURL hides the password of a URL, in its user info or in a password
// query parameter (libpq accepts both). What does not parse is hidden whole.
func redactURL(s string) string {
	if s == "" {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		return redactedText
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx") // as url.URL.Redacted does
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// render formats cfg as TOML with its secrets redacted.
func render(cfg any) string {
	b, err := toml.Marshal(redacted(cfg).Interface())
	if err != nil {
		return fmt.Sprintf("config: %v", err)
	}
	return string(b)
}

// logValue returns cfg as nested slog groups with its secrets redacted.
func logValue(cfg any) slog.Value {
	return slog.GroupValue(attrs(redacted(cfg))...)
}

func attrs(v reflect.Value) []slog.Attr {
	var out []slog.Attr
	for _, f := range tomlFields(v) {
		switch {
		case f.embedded:
			out = append(out, attrs(f.value)...)
		case f.sf.Type == durationType:
			out = append(out, slog.String(f.name, f.value.Interface().(Duration).String()))
		case f.sf.Type.Kind() == reflect.Struct:
			out = append(out, slog.Attr{Key: f.name, Value: slog.GroupValue(attrs(f.value)...)})
		default:
			out = append(out, slog.Any(f.name, f.value.Interface()))
		}
	}
	return out
}
