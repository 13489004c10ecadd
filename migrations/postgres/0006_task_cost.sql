-- What a task's brain calls cost, when prices are configured for its brain (US dollars).
ALTER TABLE tasks ADD COLUMN cost DOUBLE PRECISION;
