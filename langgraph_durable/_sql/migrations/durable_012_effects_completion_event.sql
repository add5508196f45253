-- The outbox event type an effect announces its completion with (`@effect(event=...)`),
-- kept with the claim so that a completion resolved by hand (`resolve(completed=...)`)
-- stores the event too, as every other completion does (I7). Rows claimed before this
-- migration have none: their hand-resolved completions announce nothing.
ALTER TABLE langgraph_durable_effects ADD COLUMN IF NOT EXISTS completion_event TEXT;
