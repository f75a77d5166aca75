-- Whether the role connected is a superuser.
SELECT rolsuper FROM pg_roles WHERE rolname = current_user;
