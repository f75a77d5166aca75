package events

// DeploymentFreezeOverridden reports that an admin created a deployment despite
// active freezes; it carries FreezeOverriddenData.
const DeploymentFreezeOverridden Type = DeploymentPrefix + "freeze_overridden"

// FreezeOverriddenData is the data of DeploymentFreezeOverridden: who overrode
// which freezes.
type FreezeOverriddenData struct {
	Actor   string   `json:"actor"`
	Freezes []string `json:"freezes"`
	Reasons []string `json:"reasons"`
}
