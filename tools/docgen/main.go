// Command docgen writes the references generated from the code: under docs/reference/,
// the configuration of each daemon (from internal/config's structs and their doc
// comments), the mantisctl command line (from its cobra tree and exit codes), the
// metrics of every process (from their registries) and the HTTP API (from
// api/openapi.yaml); and the sample configurations of deploy/ (from the same structs).
// Run it from the module's root: `make docs`. `make docs-check` writes them into a
// temporary directory and fails when they differ from those committed.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}

func run() error {
	root := flag.String("root", ".", "the module's root")
	out := flag.String("out", "docs/reference", "the directory of the reference pages")
	samples := flag.String("samples", "deploy", "the directory of the sample configurations")
	flag.Parse()
	files, err := generate(*root)
	if err != nil {
		return err
	}
	for name, content := range files {
		dir := *out
		if filepath.Ext(name) == ".toml" {
			dir = *samples
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	return nil
}

// generate returns every generated file by name: the pages (.md) and the samples
// (.toml).
func generate(root string) (map[string]string, error) {
	files := map[string]string{}
	docs, err := parseDocs(filepath.Join(root, "internal", "config"))
	if err != nil {
		return nil, err
	}
	for _, d := range daemons() {
		page, err := configPage(d, docs)
		if err != nil {
			return nil, err
		}
		files[d.Name+".md"] = page
		for _, s := range d.Samples {
			if files[s.File], err = sampleFile(d, s, docs); err != nil {
				return nil, err
			}
		}
	}
	if files["metrics.md"], err = metricsPage(); err != nil {
		return nil, err
	}
	if files["mantisctl.md"], err = cliPage(root); err != nil {
		return nil, err
	}
	if files["http-api.md"], err = httpAPIPage(root); err != nil {
		return nil, err
	}
	return files, nil
}
