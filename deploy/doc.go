// Package deploy holds Mantis's installation artefacts (container image, Compose
// file, Helm chart, systemd units, Ansible role, broker definitions). It has no code:
// its tests check that the artefacts keep the rules deploy/README.md states.
package deploy
