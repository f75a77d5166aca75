package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"
)

// outputFormat is a value of -o.
type outputFormat string

// The output formats of -o.
const (
	outputText  outputFormat = "text"
	outputJSON  outputFormat = "json"
	outputYAML  outputFormat = "yaml"
	outputJSONL outputFormat = "jsonl"
)

// outputFormats are the values -o accepts, in the order --help names them.
var outputFormats = []outputFormat{outputText, outputJSON, outputYAML, outputJSONL}

// outputHelp is the help of -o.
const outputHelp = "output format: text, json, yaml or jsonl (jsonl: one JSON object per line; watch streams its events)"

func parseOutputFormat(s string) (outputFormat, error) {
	for _, f := range outputFormats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(outputFormats))
	for i, f := range outputFormats {
		names[i] = string(f)
	}
	return "", invalidInput(fmt.Errorf("--output: must be one of %s, got %q", strings.Join(names, ", "), s))
}

// structured reports whether f prints data rather than text for people.
func (f outputFormat) structured() bool { return f != outputText }

// printData prints v as f: indented JSON, YAML, or JSON lines (a slice one element
// per line, anything else on one line). Text is each command's own.
func printData(w io.Writer, f outputFormat, v any) error {
	switch f {
	case outputJSON:
		return printJSON(w, v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encoding YAML: %w", err)
		}
		_, err = w.Write(b)
		return err
	case outputJSONL:
		return printJSONLines(w, v)
	}
	return fmt.Errorf("printing %T as %q: not a data format", v, f)
}

// printJSONLines writes a slice one element per line, anything else on one line.
func printJSONLines(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice {
		return enc.Encode(v)
	}
	for i := range rv.Len() {
		if err := enc.Encode(rv.Index(i).Interface()); err != nil {
			return err
		}
	}
	return nil
}

// printJSON writes v indented.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printListData prints items as data when format is structured (no items as an
// empty list, not null) and reports whether it did; a table is the caller's.
func printListData[T any](out io.Writer, format outputFormat, items []T) (bool, error) {
	if !format.structured() {
		return false, nil
	}
	if items == nil {
		items = []T{}
	}
	return true, printData(out, format, items)
}

// printTable prints items as data when format is structured (as printListData
// does), and otherwise as a table: header (columns separated by tabs), then the row
// that row writes for each item, ended by a newline.
func printTable[T any](out io.Writer, format outputFormat, items []T, header string, row func(w io.Writer, item T)) error {
	if done, err := printListData(out, format, items); done {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	for _, item := range items {
		row(w, item)
	}
	return w.Flush()
}
