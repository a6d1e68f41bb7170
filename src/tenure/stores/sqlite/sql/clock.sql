-- Store time for a write transaction, raising the floor to it; one statement on the hot
-- path. On the anchored boot (boot_id = :boot_id) it is the boot clock from the anchor,
-- so wall-clock steps change nothing; otherwise the host's wall clock. Never below the
-- floor. A caller from another boot re-anchors on the time it computes (SQLite evaluates
-- every SET expression against the old row, so the new anchor is that of this very
-- write); a caller without a boot clock (:boot_id NULL) leaves the anchor alone.
UPDATE tenure_clock SET
    floor = max(floor, CASE WHEN boot_id = :boot_id
                            THEN anchor_wall + (:boot_now - anchor_boot)
                            ELSE :host_now END),
    boot_id = coalesce(:boot_id, boot_id),
    anchor_wall = CASE WHEN :boot_id IS NULL OR boot_id = :boot_id THEN anchor_wall
                       ELSE max(floor, :host_now) END,
    anchor_boot = CASE WHEN :boot_id IS NULL OR boot_id = :boot_id THEN anchor_boot
                       ELSE :boot_now END
WHERE id = 0
RETURNING floor
