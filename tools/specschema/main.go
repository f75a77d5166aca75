// Command specschema writes the JSON Schema of a deployment spec, generated from
// internal/contract/spec's Go types, to api/deployment-spec.schema.json (or the file given
// with -o). Run it from the module's root: `make api-schema`.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mantis-deploy/mantis/internal/contract/spec/specschema"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "specschema:", err)
		os.Exit(1)
	}
}

func run() error {
	out := flag.String("o", "api/deployment-spec.schema.json", "the file to write")
	flag.Parse()
	b, err := specschema.Generate()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return nil
}
