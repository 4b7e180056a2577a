/**
 * The status slot of each node on the canvas. The run panel (src/run/) writes the
 * status of the node runs it follows (`running`, `succeeded`, `failed`, `skipped`,
 * `waiting` for a person, `cancelled`); the node components only read it.
 */
import { create } from 'zustand';

export interface NodeRunBadge {
  status: string;
  /** Optional short text shown on hover (an error message, a duration). */
  detail?: string;
  /** The status in the UI language (the badge shows it instead of `status`). */
  label?: string;
}

interface RunStatusState {
  byNode: Record<string, NodeRunBadge>;
  setNodeStatus: (nodeId: string, badge: NodeRunBadge | null) => void;
  setAll: (byNode: Record<string, NodeRunBadge>) => void;
  clear: () => void;
}

export const useRunStatus = create<RunStatusState>((set) => ({
  byNode: {},
  setNodeStatus: (nodeId, badge) => set((s) => {
    const byNode = { ...s.byNode };
    if (badge) byNode[nodeId] = badge;
    else delete byNode[nodeId];
    return { byNode };
  }),
  setAll: (byNode) => set({ byNode }),
  clear: () => set({ byNode: {} }),
}));
