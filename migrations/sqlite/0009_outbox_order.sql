-- A conversation's deliveries go out in order: claims look up its other deliveries.
CREATE INDEX outbox_conversation ON outbox (conversation_id, status, id);
