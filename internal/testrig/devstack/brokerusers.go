package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
)

// BrokerPermissions is what a broker user may do on a vhost: RabbitMQ's configure,
// write and read patterns over exchange and queue names.
type BrokerPermissions struct {
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

// nothing is RabbitMQ's pattern that matches no name.
const nothing = "^$"

// Broker users of the stack, each for one part of Mantis.
const (
	MandibleBrokerUser = "mantis-mandible"
	ThoraxBrokerUser   = "mantis-thorax"
)

// MandiblePermissions let Mandible declare the topology, publish nudges and
// analysis requests, consume analysis requests and manage the DLQ.
var MandiblePermissions = BrokerPermissions{Configure: ".*", Write: ".*", Read: ".*"}

// ThoraxPermissions let Thorax consume the command queues and nothing else: it
// never declares (a passive declare needs no permission), never publishes, and
// acknowledging or rejecting a delivery needs none either.
var ThoraxPermissions = BrokerPermissions{
	Configure: nothing,
	Write:     nothing,
	Read:      `^mantis\.commands\.priority\.(high|normal|low)$`,
}

// BrokerAdmin calls the management API as an administrator.
type BrokerAdmin struct {
	Client   *http.Client
	API      string // https://host:port/api
	User     string
	Password string
}

// EnsureUser creates or updates user with password and no tags (no management
// access), and sets its permissions on vhost.
func (a BrokerAdmin) EnsureUser(ctx context.Context, vhost, user, password string, perms BrokerPermissions) error {
	body, err := json.Marshal(map[string]string{"password": password, "tags": ""})
	if err != nil {
		return err
	}
	if err := a.call(ctx, http.MethodPut, "/users/"+url.PathEscape(user), body); err != nil {
		return fmt.Errorf("creating broker user %s: %w", user, err)
	}
	if body, err = json.Marshal(perms); err != nil {
		return err
	}
	if err := a.call(ctx, http.MethodPut, "/permissions/"+url.PathEscape(vhost)+"/"+url.PathEscape(user), body); err != nil {
		return fmt.Errorf("setting the permissions of broker user %s on %s: %w", user, vhost, err)
	}
	return nil
}

// DeleteUser removes user.
func (a BrokerAdmin) DeleteUser(ctx context.Context, user string) error {
	return a.call(ctx, http.MethodDelete, "/users/"+url.PathEscape(user), nil)
}

func (a BrokerAdmin) call(ctx context.Context, method, path string, body []byte) error {
	return managementCallAs(ctx, a.Client, method, a.API+path, a.User, a.Password, body)
}

// ensureServiceUsers creates Mandible's and Thorax's users with passwords kept
// under the stack directory (0600), and records them in Env.
func (s *Stack) ensureServiceUsers(ctx context.Context, admin BrokerAdmin) error {
	for _, u := range []struct {
		user, secret, envPrefix string
		perms                   BrokerPermissions
	}{
		{MandibleBrokerUser, "rabbitmq-mandible-password", "MANTIS_AMQP_MANDIBLE", MandiblePermissions},
		{ThoraxBrokerUser, "rabbitmq-thorax-password", "MANTIS_AMQP_THORAX", ThoraxPermissions},
	} {
		password, err := s.secret(u.secret)
		if err != nil {
			return err
		}
		if err := admin.EnsureUser(ctx, rabbitmqVHost, u.user, password, u.perms); err != nil {
			return err
		}
		s.Env[u.envPrefix+"_USER"] = u.user
		s.Env[u.envPrefix+"_PASSWORD"] = password
	}
	return nil
}
