-- A webhook reaches a loopback, private, link-local or otherwise non-public address
-- only when it says so (allow_private_network): the delivery client checks the
-- address it is about to connect to, after DNS, so that a public name that resolves
-- to an inside address (DNS rebinding) cannot turn Mandible into a way in. Existing
-- webhooks did not say so and are held to the same rule.
ALTER TABLE webhooks ADD COLUMN allow_private_network boolean NOT NULL DEFAULT false;
