-- Records that a migration ($1 version, $2 name, $3 checksum) was applied.
INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3);
