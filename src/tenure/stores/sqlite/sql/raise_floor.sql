-- Raise the generation floor to :generation (never lower it).
UPDATE tenure_floor SET generation = max(generation, :generation) WHERE id = 0
