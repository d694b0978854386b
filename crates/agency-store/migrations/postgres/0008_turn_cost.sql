-- What a turn's model calls cost, in pico-dollars (10^-12 USD); NULL when a model had no price.
ALTER TABLE turns ADD COLUMN cost_pico BIGINT;
