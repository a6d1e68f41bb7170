LISTEN {ended_channel}
