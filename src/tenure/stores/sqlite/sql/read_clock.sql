-- Store time for a read, as clock.sql computes it, changing nothing.
SELECT max(floor, CASE WHEN boot_id = :boot_id
                       THEN anchor_wall + (:boot_now - anchor_boot)
                       ELSE :host_now END)
FROM tenure_clock WHERE id = 0
