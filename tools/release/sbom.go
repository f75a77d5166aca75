package main

import (
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The SBOM is CycloneDX 1.5 JSON written from what the Go linker embedded in each
// binary (debug/buildinfo, what `go version -m` prints): the modules actually
// linked, with their versions, and the Go toolchain.

type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	SerialNumber string          `json:"serialNumber"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp"`
	Component cdxComponent `json:"component"`
	Tools     struct {
		Components []cdxComponent `json:"components"`
	} `json:"tools"`
}

type cdxComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref,omitempty"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	PURL       string        `json:"purl,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// writeSBOM writes mantis_<version>.cdx.json for binaries.
func writeSBOM(o options, binaries []string) error {
	bom, err := BuildSBOM(o.Version, o.MTime, binaries)
	if err != nil {
		return err
	}
	b, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Dist, fmt.Sprintf("mantis_%s.cdx.json", o.Version)), append(b, '\n'), 0o644)
}

// BuildSBOM reads each binary's build information: every binary is an application
// component depending on the module components it links.
func BuildSBOM(version string, at time.Time, binaries []string) (*cdxBOM, error) {
	bom := &cdxBOM{BOMFormat: "CycloneDX", SpecVersion: "1.5", Version: 1}
	bom.Metadata.Timestamp = at.Format(time.RFC3339)
	bom.Metadata.Tools.Components = []cdxComponent{{Type: "application", Name: "mantis tools/release"}}
	modules := map[string]cdxComponent{}
	for _, path := range binaries {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if bom.Metadata.Component.Name == "" {
			bom.Metadata.Component = moduleComponent("application", info.Main.Path, version)
		}
		goarch := ""
		for _, s := range info.Settings {
			if s.Key == "GOARCH" {
				goarch = s.Value
			}
		}
		name := filepath.Base(path)
		app := cdxComponent{Type: "application", BOMRef: name + "/linux/" + goarch, Name: name, Version: version,
			Properties: []cdxProperty{{Name: "golang:goversion", Value: info.GoVersion}, {Name: "golang:goarch", Value: goarch}}}
		dep := cdxDependency{Ref: app.BOMRef, DependsOn: []string{}}
		for _, m := range info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			c := moduleComponent("library", m.Path, m.Version)
			modules[c.BOMRef] = c
			dep.DependsOn = append(dep.DependsOn, c.BOMRef)
		}
		bom.Components = append(bom.Components, app)
		bom.Dependencies = append(bom.Dependencies, dep)
	}
	for _, ref := range slices.Sorted(maps.Keys(modules)) {
		bom.Components = append(bom.Components, modules[ref])
	}
	// The same binaries give the same serial number: a name-based (version 5 style)
	// UUID of the version and the dependency graph.
	u := sha256.Sum256(fmt.Appendf(nil, "%s %v", version, bom.Dependencies))
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	bom.SerialNumber = fmt.Sprintf("urn:uuid:%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	return bom, nil
}

func moduleComponent(typ, path, version string) cdxComponent {
	purl := "pkg:golang/" + path
	if version != "" && version != "(devel)" {
		purl += "@" + version
	}
	return cdxComponent{Type: typ, BOMRef: purl, Name: path, Version: version, PURL: purl}
}
