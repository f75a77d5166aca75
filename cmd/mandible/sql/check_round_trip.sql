-- A round trip to the server, the first thing check-config --connect asks.
SELECT 1;
