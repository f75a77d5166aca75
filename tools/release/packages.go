package main

import (
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
	"github.com/goreleaser/nfpm/v2/files"
	_ "github.com/goreleaser/nfpm/v2/rpm" // registers the rpm packager
)

// scripts are the packages' maintainer scripts; @UNIT@ and @CONFIG@ name the
// package's unit and configuration file.
//
//go:embed scripts/*.sh
var scripts embed.FS

// Formats are the package formats a release writes.
var Formats = []string{"deb", "rpm"}

// UnitDir is where the packages install systemd units (Debian 12 and the RPM
// distributions both read it).
const UnitDir = "/usr/lib/systemd/system"

// writePackages writes each program's .deb and .rpm for arch into o.Dist.
func writePackages(o options, arch string, bins map[string]string, work string) error {
	for _, p := range Programs {
		dir := filepath.Join(work, arch, "pkg", p.Package)
		info, err := packageInfo(o, arch, p, bins[p.Installed], dir)
		if err != nil {
			return err
		}
		for _, format := range Formats {
			if err := writePackage(o, format, *info); err != nil {
				return fmt.Errorf("%s %s %s: %w", p.Package, format, arch, err)
			}
		}
	}
	return nil
}

func writePackage(o options, format string, info nfpm.Info) error {
	packager, err := nfpm.Get(format)
	if err != nil {
		return err
	}
	info.Contents = slices.Clone(info.Contents)
	if err := nfpm.PrepareForPackager(&info, format); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(o.Dist, packager.ConventionalFileName(&info)))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := packager.Package(&info, f); err != nil {
		return err
	}
	return f.Close()
}

// packageInfo describes p's package: its binary in /usr/bin, its unit, its
// configuration as a config file kept across upgrades, and the scripts that
// create the mantis user and tell a running systemd of the unit. Files it must
// write (the unit, the scripts) go to dir.
func packageInfo(o options, arch string, p Program, binary, dir string) (*nfpm.Info, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	contents := files.Contents{
		{Source: binary, Destination: "/usr/bin/" + p.Installed, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
	}
	var s nfpm.Scripts
	if p.Unit != "" {
		unit, err := PackagedUnit(o.Repo, p)
		if err != nil {
			return nil, err
		}
		unitPath := filepath.Join(dir, p.Unit)
		if err := os.WriteFile(unitPath, unit, 0o644); err != nil {
			return nil, err
		}
		config := "/etc/mantis/" + p.ConfigName
		contents = append(contents,
			&files.Content{Source: unitPath, Destination: UnitDir + "/" + p.Unit, FileInfo: &files.ContentFileInfo{Mode: 0o644}},
			&files.Content{Destination: "/etc/mantis", Type: files.TypeDir, FileInfo: &files.ContentFileInfo{Mode: 0o755}},
			&files.Content{Source: filepath.Join(o.Repo, "deploy", p.Config), Destination: config,
				Type: files.TypeConfigNoReplace, FileInfo: &files.ContentFileInfo{Mode: 0o644}},
		)
		if s, err = writeScripts(dir, p.Unit, config); err != nil {
			return nil, err
		}
	}
	info := nfpm.WithDefaults(&nfpm.Info{
		Name:        p.Package,
		Arch:        arch,
		Platform:    "linux",
		Version:     o.Version,
		Release:     "1",
		Section:     "admin",
		Priority:    "optional",
		Maintainer:  "Mantis maintainers <https://github.com/mantis-deploy/mantis>",
		Vendor:      "mantis-deploy",
		Homepage:    "https://github.com/mantis-deploy/mantis",
		Description: p.Summary,
		MTime:       o.MTime,
		Overridables: nfpm.Overridables{
			Contents: contents,
			Scripts:  s,
			RPM:      nfpm.RPM{Summary: p.Summary, Group: "System Environment/Daemons"},
		},
	})
	return info, info.Validate()
}

// writeScripts writes the maintainer scripts for unit and config into dir.
func writeScripts(dir, unit, config string) (nfpm.Scripts, error) {
	r := strings.NewReplacer("@UNIT@", unit, "@CONFIG@", config)
	paths := map[string]string{}
	for _, name := range []string{"preinstall", "postinstall", "preremove", "postremove"} {
		b, err := scripts.ReadFile("scripts/" + name + ".sh")
		if err != nil {
			return nfpm.Scripts{}, err
		}
		paths[name] = filepath.Join(dir, name+".sh")
		if err := os.WriteFile(paths[name], []byte(r.Replace(string(b))), 0o755); err != nil {
			return nfpm.Scripts{}, err
		}
	}
	return nfpm.Scripts{PreInstall: paths["preinstall"], PostInstall: paths["postinstall"],
		PreRemove: paths["preremove"], PostRemove: paths["postremove"]}, nil
}
