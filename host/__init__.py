"""Host mechanisms: cgroups, VM backends, image build, SSH, model pins and conversion."""
