package config

// ApplicationNamePrefix starts the application_name of each replica's database
// sessions, so that pg_stat_activity tells the replicas apart.
const ApplicationNamePrefix = "mandible "

// ApplicationName is the application_name of the replica's database sessions,
// unless database.url sets its own; PostgreSQL keeps its first 63 bytes.
func (c Mandible) ApplicationName() string { return ApplicationNamePrefix + c.ReplicaID }
