-- Listen: wait for notifications on one channel. LISTEN takes its channel as an
-- identifier, not as a parameter, so schema.Listen puts the quoted name of one of the
-- schema.Channel constants in place of the placeholder below.
LISTEN {channel};
