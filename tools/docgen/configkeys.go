package main

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mantis-deploy/mantis/internal/config"
)

// key is one configuration key with what the reference and the sample say of it.
type key struct {
	config.KeyDoc
	// Doc is the key's description, from its field's doc comment.
	Doc string
}

// section is a table of keys ("" for the top-level keys) and its description.
type section struct {
	Name, Doc string
	Keys      []key
}

// sections groups the keys of cfg by section, in the order of cfg's fields, each
// key described by its field's doc comment in docs. A key without one is an error.
func sections(cfg any, docs *goDocs) ([]section, error) {
	all := config.Keys(cfg)
	names := map[string]map[string]string{} // struct -> Go field -> TOML key
	for _, k := range all {
		if names[k.Struct] == nil {
			names[k.Struct] = map[string]string{}
		}
		names[k.Struct][k.Field] = k.Path[len(k.Path)-1]
	}
	var out []section
	var missing []string
	for _, k := range all {
		doc, err := docs.fieldDoc(k.Struct, k.Field)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s (%s)", k.Key, err))
			continue
		}
		name := ""
		if len(k.Path) > 1 {
			name = strings.Join(k.Path[:len(k.Path)-1], ".")
		}
		i := slices.IndexFunc(out, func(s section) bool { return s.Name == name })
		if i < 0 {
			out = append(out, section{Name: name})
			i = len(out) - 1
		}
		out[i].Keys = append(out[i].Keys, key{KeyDoc: k, Doc: prose(doc, k.Field, names[k.Struct])})
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("configuration keys without a doc comment:\n  %s", strings.Join(missing, "\n  "))
	}
	// The top-level keys come first: in TOML they cannot follow a table.
	slices.SortStableFunc(out, func(a, b section) int {
		return boolInt(a.Name != "") - boolInt(b.Name != "")
	})
	return out, sectionDocs(cfg, docs, out)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sectionDocs describes each section by the doc comment of its field in the
// configuration's struct, or else of the section's type.
func sectionDocs(cfg any, docs *goDocs, out []section) error {
	t := reflect.TypeOf(cfg)
	for i := range out {
		if out[i].Name == "" {
			continue
		}
		sf, ok := fieldByTOML(t, out[i].Name)
		if !ok {
			return fmt.Errorf("section [%s] is no field of %s", out[i].Name, t.Name())
		}
		doc := docs.fields[t.Name()][sf.Name]
		if strings.TrimSpace(doc) == "" {
			doc = docs.types[sf.Type.Name()]
		}
		if strings.TrimSpace(doc) == "" {
			return fmt.Errorf("section [%s]: neither %s.%s nor %s has a doc comment", out[i].Name, t.Name(), sf.Name, sf.Type.Name())
		}
		// Only the first word names the section: "Thorax is how Mandible judges Thorax
		// instances" keeps its second Thorax.
		text := prose(doc, "", nil)
		if rest, ok := strings.CutPrefix(text, sf.Name+" "); ok {
			text = "`" + out[i].Name + "` " + rest
		}
		out[i].Doc = text
	}
	return nil
}

func fieldByTOML(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		if tag, _, _ := strings.Cut(sf.Tag.Get("toml"), ","); tag == name {
			return sf, true
		}
	}
	return reflect.StructField{}, false
}

// typeName describes a key's type for a reader of TOML.
func typeName(t reflect.Type) string {
	switch {
	case t == reflect.TypeFor[config.Duration]():
		return "duration"
	case t == reflect.TypeFor[config.Ratio]():
		return "number, 0 to 1"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	case reflect.Slice:
		return "list of strings"
	case reflect.Map:
		return "table of strings"
	}
	return t.String()
}

// empty reports whether v is the empty value of its type: an empty string, list
// or table. Such a default is "not set".
func empty(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		return rv.Len() == 0
	}
	return false
}

// tomlValue writes v as a TOML value.
func tomlValue(v any) string {
	switch x := v.(type) {
	case config.Duration:
		return strconv.Quote(shortDuration(x.Duration))
	case config.Ratio:
		if x == "" {
			return "1"
		}
		return string(x)
	case string:
		return strconv.Quote(x)
	case []string:
		items := make([]string, len(x))
		for i, s := range x {
			items[i] = strconv.Quote(s)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case map[string]string:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = strconv.Quote(k) + " = " + strconv.Quote(x[k])
		}
		if len(pairs) == 0 {
			return "{}"
		}
		return "{ " + strings.Join(pairs, ", ") + " }"
	}
	return fmt.Sprint(v)
}

// shortDuration is d as Go writes it, without the zero units it ends with: "2m"
// rather than "2m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
