package deploy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// brokerDefinitions is the part of a RabbitMQ definitions file Mantis ships.
type brokerDefinitions struct {
	RabbitVersion string `json:"rabbit_version"`
	VHosts        []struct {
		Name string `json:"name"`
	} `json:"vhosts"`
	Users []struct {
		Name     string   `json:"name"`
		Password string   `json:"password"`
		Tags     []string `json:"tags"`
	} `json:"users"`
	Permissions []struct {
		User  string `json:"user"`
		VHost string `json:"vhost"`
		devstack.BrokerPermissions
	} `json:"permissions"`
}

// roleDefaults is the part of the Ansible role's defaults the definitions mirror.
type roleDefaults struct {
	VHost               string                     `json:"amqps_vhost"`
	MandibleUser        string                     `json:"rabbitmq_mandible_user"`
	MandiblePermissions devstack.BrokerPermissions `json:"rabbitmq_mandible_permissions"`
	ThoraxUser          string                     `json:"rabbitmq_thorax_user"`
	ThoraxPermissions   devstack.BrokerPermissions `json:"rabbitmq_thorax_permissions"`
	AMQPSPort           int                        `json:"rabbitmq_amqps_port"`
}

// passwordPlaceholder stands for every password in the shipped definitions.
const passwordPlaceholder = "CHANGE_ME"

func TestBrokerDefinitionsMatchTheRoleAndTheDevStack(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("rabbitmq/definitions.json")
	require.NoError(t, err)
	var defs brokerDefinitions
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&defs))
	b, err = os.ReadFile("ansible/roles/rabbitmq/defaults/main.yml")
	require.NoError(t, err)
	var role roleDefaults
	require.NoError(t, yaml.Unmarshal(b, &role))

	require.Equal(t, "/mantis", role.VHost, "the guide's vhost")
	require.Equal(t, 5671, role.AMQPSPort)
	require.Len(t, defs.VHosts, 1)
	require.Equal(t, role.VHost, defs.VHosts[0].Name)

	// The dev stack's users carry the same rights: the Thorax user is the same name.
	require.Equal(t, devstack.MandiblePermissions, role.MandiblePermissions)
	require.Equal(t, devstack.ThoraxPermissions, role.ThoraxPermissions)
	require.Equal(t, devstack.ThoraxBrokerUser, role.ThoraxUser)
	want := map[string]devstack.BrokerPermissions{
		role.MandibleUser: role.MandiblePermissions,
		role.ThoraxUser:   role.ThoraxPermissions,
	}
	got := map[string]devstack.BrokerPermissions{}
	for _, p := range defs.Permissions {
		require.Equal(t, role.VHost, p.VHost)
		got[p.User] = p.BrokerPermissions
	}
	require.Equal(t, want, got)
	require.Len(t, defs.Users, 2)
	for _, u := range defs.Users {
		require.Contains(t, want, u.Name)
		require.Equal(t, passwordPlaceholder, u.Password, "no real password is shipped")
	}
}
