-- UnlistenAll: stop every LISTEN of the connection before it goes back to its pool.
UNLISTEN *;
