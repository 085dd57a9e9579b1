//! Keystone/Neutron/Nova/Octavia client and the API simulator.
