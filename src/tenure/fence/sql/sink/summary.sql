SELECT (SELECT count(*) FROM sink_records),
       (SELECT count(*) FROM sink_rejections),
       (SELECT count(*) FROM tenure_fence)
