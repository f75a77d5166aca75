package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// goDocs are the doc comments of one Go package's declarations, read from its
// source (test files left out).
type goDocs struct {
	// fields holds each struct field's doc comment, by struct type and field name.
	fields map[string]map[string]string
	// types holds each type's doc comment; consts each constant's.
	types, consts map[string]string
	// constValues holds each constant's literal value, as written.
	constValues map[string]string
}

// parseDocs reads the doc comments of the package in dir.
func parseDocs(dir string) (*goDocs, error) {
	d := &goDocs{fields: map[string]map[string]string{}, types: map[string]string{}, consts: map[string]string{},
		constValues: map[string]string{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			if gen, ok := decl.(*ast.GenDecl); ok {
				d.addDecl(gen)
			}
		}
	}
	return d, nil
}

func (d *goDocs) addDecl(gen *ast.GenDecl) {
	for _, spec := range gen.Specs {
		switch s := spec.(type) {
		case *ast.TypeSpec:
			doc := s.Doc
			if doc == nil && len(gen.Specs) == 1 {
				doc = gen.Doc
			}
			d.types[s.Name.Name] = doc.Text()
			if st, ok := s.Type.(*ast.StructType); ok {
				d.addStruct(s.Name.Name, st)
			}
		case *ast.ValueSpec:
			if gen.Tok != token.CONST {
				continue
			}
			doc := s.Doc
			if doc == nil && len(gen.Specs) == 1 {
				doc = gen.Doc
			}
			for i, name := range s.Names {
				d.consts[name.Name] = doc.Text()
				if i < len(s.Values) {
					if lit, ok := s.Values[i].(*ast.BasicLit); ok {
						d.constValues[name.Name] = lit.Value
					}
				}
			}
		}
	}
}

func (d *goDocs) addStruct(name string, st *ast.StructType) {
	m := map[string]string{}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			m[n.Name] = f.Doc.Text()
		}
	}
	d.fields[name] = m
}

// fieldDoc is the doc comment of a struct's field, or an error naming the field when
// it has none: every key is documented where it is declared.
func (d *goDocs) fieldDoc(structName, field string) (string, error) {
	doc := strings.TrimSpace(d.fields[structName][field])
	if doc == "" {
		return "", fmt.Errorf("%s.%s has no doc comment", structName, field)
	}
	return doc, nil
}

var (
	spaces     = regexp.MustCompile(`\s+`)
	identifier = regexp.MustCompile("`?\\b[A-Z][A-Za-z0-9]*\\b`?")
	camelCase  = regexp.MustCompile(`[a-z0-9][A-Z]|[A-Z]{2}[a-z]`)
	titleCase  = regexp.MustCompile(`^[A-Z][a-z0-9]+$`)
)

// prose turns a doc comment into one paragraph of reference text: its lines joined,
// and the Go names of the struct's fields replaced by their TOML keys: the comment's
// first word when it is the field's own name, and anywhere a field's name written in
// CamelCase ("DirectURL") or capitalised ("Insecure"). An initialism such as "URL" or
// "TLS" is left alone past the first word: prose uses it too.
func prose(doc, field string, keys map[string]string) string {
	text := strings.TrimSpace(spaces.ReplaceAllString(doc, " "))
	var b strings.Builder
	last := 0
	for _, m := range identifier.FindAllStringIndex(text, -1) {
		word := text[m[0]:m[1]]
		bare := strings.Trim(word, "`")
		key, ok := keys[bare]
		if !ok || !(camelCase.MatchString(bare) || titleCase.MatchString(bare) || (m[0] == 0 && bare == field)) {
			continue
		}
		b.WriteString(text[last:m[0]])
		b.WriteString("`" + key + "`")
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String()
}
