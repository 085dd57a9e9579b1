//! Pure planner: OpenStack snapshot to the desired kernel state.
