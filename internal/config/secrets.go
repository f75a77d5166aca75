package config

import "path/filepath"

// Secrets is where Mandible resolves the file: references of secret env values.
type Secrets struct {
	// FilesDir is the only directory whose files a step's env_secret may reference
	// ("file:/path" under it); empty refuses every file: reference. References are read
	// when Thorax fetches the command, so every replica needs the same files.
	FilesDir string `toml:"files_dir"`
}

func (s Secrets) validate(p *problems) {
	if s.FilesDir != "" && !filepath.IsAbs(s.FilesDir) {
		p.add("secrets.files_dir", "must be an absolute path, got %q", s.FilesDir)
	}
}
